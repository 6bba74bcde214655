"""Envoy's plain ``/stats`` text (docs/sweep.md, "Target metrics"), parsed by hand: no
library reads it.

The format, as Envoy's admin documentation shows it (``/stats``, "Admin endpoints: stats"
in its quick start): one ``name: value`` line per statistic, names dotted
(``http.ingress_http.downstream_rq_2xx: 3``), and for a histogram, on its line, the
quantiles as ``P0(interval,cumulative) P25(...) ... P100(...)``, or with
``?histogram_buckets=cumulative|disjoint`` the buckets as ``B0.5(interval,cumulative) B1(...)``;
``No recorded values`` for a histogram never updated; a text readout's value is quoted.
With ``?histogram_buckets=detailed`` a histogram's line is ``name:`` alone, followed by
indented ``totals=``, ``intervals=`` and ``summary=P0(...) ...`` lines.

What each line becomes (a `Sample`):

* ``name: 12`` -> ``name`` = 12, a gauge when Envoy's naming makes it one (`envoy_kind`),
  else a counter;
* ``name: P50(1.5,2.05) ...`` -> ``name{quantile="0.5"}`` = 2.05 (the cumulative value; the
  interval one depends on Envoy's flush interval, not on a step), a value; ``nan`` is no
  sample;
* ``name: B1(0,3) B5(1,7) ...`` -> ``name_bucket{le="1"}`` = 3, ``{le="5"}`` = 7 (cumulative
  counts; disjoint buckets are summed into cumulative ones), a counter;
* text readouts, ``No recorded values``, ``totals=`` and ``intervals=`` lines: nothing.

A line that is none of these raises ValueError naming its number: a page that is not
Envoy's /stats must not read as one.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from typing import Literal

from ._samples import Sample

__all__ = ["envoy_kind", "looks_like_envoy", "parse_envoy_stats"]

Buckets = Literal["cumulative", "disjoint"]

# Envoy names its gauges by convention: *_active (cx_active, rq_active,
# total_listeners_active), *_buffered, the circuit breakers' *_open and remaining_*; and a
# few fixed names of its server, cluster manager, listener manager and clusters (Envoy's
# statistics reference lists their types).
_GAUGE_SUFFIXES = ("_active", "_buffered", "_open")
_GAUGE_PREFIXES = ("remaining_",)
_GAUGE_NAMES = frozenset({
    "concurrency", "days_until_first_cert_expiring", "seconds_until_first_ocsp_response_expiring",
    "hot_restart_epoch", "hot_restart_generation", "live", "state", "uptime", "version",
    "memory_allocated", "memory_heap_size", "memory_physical_size", "total_connections",
    "parent_connections", "membership_healthy", "membership_degraded", "membership_excluded",
    "membership_total", "max_host_weight", "active_clusters", "warming_clusters",
    "total_listeners_warming", "total_listeners_draining", "total_filter_chains_draining",
    "workers_started", "update_time", "connected_state", "pressure", "fips_mode",
})

_LINE = re.compile(r"^(\S+):(?:[ \t]+(.*))?$")
_PART = re.compile(r"^([PB])([0-9][0-9.eE+-]*)\(([^,()]*),([^,()]*)\)$")


def envoy_kind(name: str) -> Literal["counter", "gauge"]:
    """Whether an Envoy statistic is a counter or a gauge, from its name (the plain /stats
    text does not say; ``?format=prometheus`` does, and is the better source)."""
    last = name.rsplit(".", 1)[-1]
    if (last.endswith(_GAUGE_SUFFIXES) or last.startswith(_GAUGE_PREFIXES)
            or last in _GAUGE_NAMES):
        return "gauge"
    return "counter"


def looks_like_envoy(text: str) -> bool:
    """Whether `text` reads as Envoy's plain /stats rather than Prometheus text: its first
    line is ``name: ...`` (a Prometheus sample line has no ': ' before its labels)."""
    for line in text.splitlines():
        line = line.strip()
        if line:
            return bool(re.match(r"^[^\s{#]+:(\s|$)", line))
    return False


# What Envoy writes for a value: an integer or a decimal (a histogram's quantile may be
# nan). float() alone would also take '1_000' and 'infinity'.
_DECIMAL = re.compile(r"^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$|^nan$")


def _number(text: str, where: str) -> float:
    if not _DECIMAL.match(text):
        raise ValueError(f"{where}: {text[:40]!r} is not a number")
    return float(text)


def _bound(text: str, where: str) -> str:
    # P99.9 -> quantile "0.999", B0.5 -> le "0.5": exact decimal text, as Envoy wrote it.
    try:
        number = Decimal(text)
    except InvalidOperation:
        raise ValueError(f"{where}: {text[:40]!r} is not a number") from None
    if not number.is_finite():
        raise ValueError(f"{where}: {text[:40]!r} is not a finite number")
    return format(number.normalize(), "f")


def _histogram(name: str, text: str, where: str, buckets: Buckets) -> list[Sample]:
    samples: list[Sample] = []
    running = 0.0
    for part in text.split():
        match = _PART.match(part)
        if match is None:
            raise ValueError(f"{where}: {part[:40]!r} is not P<q>(interval,cumulative) or "
                             f"B<bound>(interval,cumulative)")
        letter, bound, _interval, cumulative = match.groups()
        value = _number(cumulative.strip(), where)
        if letter == "P":
            quantile = Decimal(_bound(bound, where)) / 100
            if not 0 <= quantile <= 1:
                raise ValueError(f"{where}: P{bound} is not a percentile")
            if math.isnan(value):
                continue
            samples.append(Sample(name, name, "histogram", "value", value,
                                  {"quantile": format(quantile.normalize(), "f")}))
        else:
            if buckets == "disjoint":
                running += value
                value = running
            samples.append(Sample(f"{name}_bucket", name, "histogram", "delta", value,
                                  {"le": _bound(bound, where)}))
    return samples


def parse_envoy_stats(text: str, *, buckets: Buckets = "cumulative") -> list[Sample]:
    """The samples of an Envoy ``/stats`` page (see the module doc). `buckets` says how its
    ``B`` buckets were asked for (``histogram_buckets=disjoint`` in the URL, or not)."""
    samples: list[Sample] = []
    block: str | None = None  # the histogram a detailed block's indented lines belong to
    for number, raw in enumerate(text.splitlines(), 1):
        where = f"line {number}"
        if not raw.strip():
            continue
        if raw[:1] in " \t":
            if block is None:
                raise ValueError(f"{where}: an indented line outside a histogram block")
            key, eq, rest = raw.strip().partition("=")
            if not eq or key not in ("totals", "intervals", "summary"):
                raise ValueError(f"{where}: expected totals=, intervals= or summary=")
            if key == "summary" and rest.strip() != "No recorded values":
                samples += _histogram(block, rest, where, buckets)
            continue
        match = _LINE.match(raw.rstrip())
        if match is None:
            raise ValueError(f"{where}: expected 'name: value' (got {raw[:60]!r})")
        name, value = match.group(1), (match.group(2) or "").strip()
        block = None
        if not value:
            block = name
        elif value.startswith('"'):
            continue  # a text readout
        elif value == "No recorded values":
            continue
        elif value[:1] in "PB" and "(" in value:
            samples += _histogram(name, value, where, buckets)
        else:
            kind = envoy_kind(name)
            samples.append(Sample(name, name, kind, "delta" if kind == "counter" else "value",
                                  _number(value, where)))
    return samples
