"""``--output-format prometheus``: Nighthawk's PrometheusOutputFormatterImpl, byte for byte.

A Prometheus text exposition of the whole result (for a Pushgateway or a textfile
collector; the live exporter of a running benchmark is a different thing, nhbench._prometheus
and docs/live.md). Per statistic with an id (dots become underscores, prefix
``nighthawk_``): counters ``_min``, ``_max``, ``_mean``, ``_pstdev`` (microseconds for
latencies), and a summary with the percentiles Nighthawk picks plus ``_count`` and ``_sum``
(or two plain counters ``_count``/``_sum`` when the statistic has no percentiles); per
counter a counter. Every sample carries ``scope="<result name>"``. Families are sorted by
``"<name> <type>"`` byte order, as Nighthawk's std::map sorts them. docs/outputs.md
"prometheus" has an example.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._nhfields import (
    duration_micros,
    entries,
    fmt_double,
    has,
    int64_cast,
    percentile_points,
    results,
    statistic_value,
    to_double,
    to_uint,
)
from ._nighthawk import nhbench_extension, nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["format_prometheus", "render_prometheus"]

_PREFIX = "nighthawk"


def _micros(value: Any, name: str = "duration") -> str:
    return str(duration_micros(value, name))


def format_prometheus(document: Mapping[str, Any]) -> str:
    """The Prometheus text of a Nighthawk ``Output`` JSON document."""
    # "<metric name> <type>" -> its sample lines, in the order they were produced.
    families: dict[str, list[str]] = {}

    def add(name: str, kind: str, labels: str, value: str, suffix: str = "") -> None:
        families.setdefault(f"{name} {kind}", []).append(f"{name}{suffix}{{{labels}}} {value}")

    for result in results(document):
        scope = f'scope="{result.get("name") or ""}"'
        for statistic in entries(result, "statistics"):
            stat_id = str(statistic.get("id") or "")
            if not stat_id:
                continue
            name = f"{_PREFIX}_{stat_id.replace('.', '_')}"
            count = to_uint(statistic.get("count"), "count")
            # The mean and the sum are doubles in Nighthawk, also for latencies (whole
            # microseconds converted), which is why "195" and "780" print without ".0".
            if has(statistic, "mean"):
                mean = float(duration_micros(statistic["mean"], "mean"))
            else:
                mean = to_double(statistic.get("raw_mean"), "raw_mean")
            total = mean * count
            add(f"{name}_min", "counter", scope, statistic_value(statistic, "min", _micros))
            add(f"{name}_max", "counter", scope, statistic_value(statistic, "max", _micros))
            add(f"{name}_mean", "counter", scope, fmt_double(mean))
            add(f"{name}_pstdev", "counter", scope, statistic_value(statistic, "pstdev", _micros))
            for percentile in percentile_points(statistic):
                if has(percentile, "duration"):
                    value = _micros(percentile["duration"])
                else:
                    raw = to_double(percentile.get("raw_value"), "raw_value")
                    value = str(int64_cast(raw))
                quantile = fmt_double(to_double(percentile.get("percentile"), "percentile"))
                add(name, "summary", f'{scope},quantile="{quantile}"', value)
            if not entries(statistic, "percentiles"):
                add(f"{name}_count", "counter", scope, str(count))
                add(f"{name}_sum", "counter", scope, fmt_double(total))
            else:
                add(name, "summary", scope, str(count), "_count")
                add(name, "summary", scope, fmt_double(total), "_sum")
        for counter in entries(result, "counters"):
            counter_name = str(counter.get("name") or "").replace(".", "_")
            value_int = to_uint(counter.get("value"), "value")
            add(f"{_PREFIX}_{counter_name}", "counter", scope, str(value_int))

    out: list[str] = []
    # std::map<std::string, ...> orders its keys by bytes; for UTF-8 text that is the order of
    # code points, which is how Python compares str.
    for family in sorted(families):
        out.append(f"# TYPE {family}\n")
        out.extend(line + "\n" for line in families[family])
    out += _validity_families(document)
    return "".join(out)


#: A check's verdict as a gauge value, so that an alert can say `> 1`.
_VERDICT_VALUES = {"valid": 0, "suspect": 1, "invalid": 2}


def _validity_families(document: Mapping[str, Any]) -> list[str]:
    """An nhbench run's validity verdict (docs/trust.md "Validity"), after Nighthawk's
    families, so that those stay byte for byte Nighthawk's: a state set (one sample per
    verdict, 1 for the run's) and one gauge per check that was tested (0 valid, 1 suspect,
    2 invalid). A Prometheus consumer takes families it does not know; a document Nighthawk
    wrote has no verdict and gets none."""
    validity = None
    for entry in results(document):
        run = (nhbench_extension(entry) or {}).get("run")
        if isinstance(run, Mapping) and isinstance(run.get("validity"), Mapping):
            validity = run["validity"]
            break
    if validity is None or validity.get("verdict") not in _VERDICT_VALUES:
        return []
    out = ["# TYPE nhbench_validity gauge\n"]
    out += [f'nhbench_validity{{scope="global",verdict="{verdict}"}} '
            f'{1 if validity["verdict"] == verdict else 0}\n' for verdict in _VERDICT_VALUES]
    checks = [c for c in validity.get("checks") or () if isinstance(c, Mapping)
              and c.get("verdict") in _VERDICT_VALUES and str(c.get("name", "")).isidentifier()]
    if checks:
        out.append("# TYPE nhbench_validity_check gauge\n")
        for check in checks:
            node = check.get("node")
            if node is not None and not (isinstance(node, str) and node.isidentifier()):
                continue  # a node name no label of ours would carry as it is
            scope = "global" if node is None else node
            out.append(f'nhbench_validity_check{{scope="{scope}",check="{check["name"]}"}} '
                       f'{_VERDICT_VALUES[check["verdict"]]}\n')
    return out


def render_prometheus(result: Result) -> str:
    """`format_prometheus` of `result`'s Nighthawk document."""
    return format_prometheus(nighthawk_output(result))
