"""``--output-format dotted``: Nighthawk's DottedStringOutputFormatterImpl, byte for byte.

One ``key: value`` line per number, keys ``<result>.<statistic id>.<field>`` for every result
(each worker, then ``global``) and every statistic, empty ones included: samples, mean,
pstdev, min, max in whole microseconds (truncated) for latencies or the raw value for sizes,
then ``permilles-<p*1000>.count`` and ``.microseconds`` (or ``.value``) for the percentiles
Nighthawk picks; then ``<result>.<counter>:<value>`` (no space after the colon, as Nighthawk
writes it). docs/outputs.md "dotted" has an example.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._nhfields import (
    duration_micros,
    entries,
    has,
    int64_cast,
    percentile_points,
    results,
    statistic_value,
    to_double,
    to_uint,
)
from ._nighthawk import nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["format_dotted", "render_dotted"]


def _micros(value: Any, name: str = "duration") -> str:
    return str(duration_micros(value, name))


def format_dotted(document: Mapping[str, Any]) -> str:
    """The dotted text of a Nighthawk ``Output`` JSON document."""
    lines: list[str] = []
    for result in results(document):
        name = str(result.get("name") or "")
        for statistic in entries(result, "statistics"):
            prefix = f"{name}.{statistic.get('id') or ''}"
            count = to_uint(statistic.get("count"), "count")
            lines.append(f"{prefix}.samples: {count}")
            for field in ("mean", "pstdev", "min", "max"):
                lines.append(f"{prefix}.{field}: {statistic_value(statistic, field, _micros)}")
            for percentile in percentile_points(statistic):
                permilles = to_double(percentile.get("percentile"), "percentile") * 1000
                point = f"{prefix}.permilles-{permilles:.0f}"
                lines.append(f"{point}.count: {to_uint(percentile.get('count'), 'count')}")
                if has(percentile, "duration"):
                    lines.append(f"{point}.microseconds: {_micros(percentile['duration'])}")
                else:
                    raw = to_double(percentile.get("raw_value"), "raw_value")
                    lines.append(f"{point}.value: {int64_cast(raw)}")
        for counter in entries(result, "counters"):
            value = to_uint(counter.get("value"), "value")
            lines.append(f"{name}.{counter.get('name') or ''}:{value}")
    return "".join(line + "\n" for line in lines)


def render_dotted(result: Result) -> str:
    """`format_dotted` of `result`'s Nighthawk document."""
    return format_dotted(nighthawk_output(result))
