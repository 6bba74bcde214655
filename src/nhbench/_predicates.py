"""Failure and termination predicates: parsing, defaults and explanation.

A predicate is a counter name plus a threshold; it fires when the counter *exceeds* the
threshold (Nighthawk's semantics, so ``benchmark.http_5xx:0`` fires on the first 5xx). The C
core evaluates them during the run, because only it sees the counters in time to stop; Python
parses and validates them beforehand and explains afterwards which one fired and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ._names import COUNTERS, is_counter

__all__ = [
    "DEFAULT_FAILURE_PREDICATES",
    "UINT64_MAX",
    "FiredPredicate",
    "parse_predicate",
    "parse_predicates",
    "fired_predicates",
]

UINT64_MAX = 2**64 - 1

# Nighthawk's defaults: no error status codes, no connection failures, no stream resets. Plus
# no request given up after the retry limit: such a request used to end as a stream reset,
# and a run in which the server refused requests over and over must not pass silently.
DEFAULT_FAILURE_PREDICATES: dict[str, int] = {
    "benchmark.http_4xx": 0,
    "benchmark.http_5xx": 0,
    "benchmark.pool_connection_failure": 0,
    "benchmark.stream_resets": 0,
    "upstream_rq_retry_limit_exceeded": 0,
}


@dataclass(frozen=True)
class FiredPredicate:
    """One predicate that fired: the counter, its final value and the threshold it exceeded."""

    name: str
    value: int
    threshold: int

    def __str__(self) -> str:
        return f"{self.name} = {self.value} > {self.threshold}"


def parse_predicate(text: str) -> tuple[str, int]:
    """Parse ``"counter.name:threshold"`` into ``(name, threshold)``.

    The message of the ValueError it raises is written to follow "<option>: " directly.
    """
    if not isinstance(text, str):
        raise ValueError(f"must be 'counter:threshold' (got {text!r})")
    # Counter names never contain ':', so the last ':' separates the threshold; rpartition
    # also gives a clear error for a missing threshold instead of an unpacking failure.
    name, sep, threshold = text.strip().rpartition(":")
    if not sep or not name:
        raise ValueError(f"must be 'counter:threshold', e.g. benchmark.http_5xx:0 (got {text!r})")
    return _check_name(name.strip()), _check_threshold(threshold.strip(), text)


def parse_predicates(value: object) -> dict[str, int]:
    """Accept a mapping, one ``"name:threshold"`` string, or an iterable of such strings.

    A comma-separated string (``"a:1,b:2"``) is accepted too, because that is what people
    type when they forget that the flag is repeatable.
    """
    if value is None:
        return {}
    if isinstance(value, Mapping):
        return {_check_name(str(k)): _check_threshold(v, f"{k}:{v}") for k, v in value.items()}
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, Iterable):
        raise ValueError(f"must be a list of 'counter:threshold' strings (got {value!r})")
    result: dict[str, int] = {}
    for item in value:
        if isinstance(item, (tuple, list)) and len(item) == 2:
            name, threshold = _check_name(str(item[0])), _check_threshold(item[1], str(item))
        else:
            name, threshold = parse_predicate(item)
        result[name] = threshold
    return result


def fired_predicates(
    names: Iterable[str], counters: Mapping[str, int], predicates: Mapping[str, int]
) -> list[FiredPredicate]:
    """Explain the predicates the core reported as fired, with the counter values."""
    return [
        FiredPredicate(name, int(counters.get(name, 0)), int(predicates.get(name, 0)))
        for name in names
    ]


def _check_name(name: str) -> str:
    # A typo in a counter name would make the predicate silently never fire, which is the
    # worst outcome for a safety check, so unknown names are rejected up front.
    if not is_counter(name):
        raise ValueError(f"unknown counter {name!r} (known counters: {', '.join(COUNTERS)}, "
                         "and benchmark.http_<code> for a status code 100-599)")
    return name


def _check_threshold(threshold: Any, text: object) -> int:
    if isinstance(threshold, bool):
        raise ValueError(f"threshold must be an integer (got {text!r})")
    try:
        value = int(threshold)
    except (TypeError, ValueError):
        raise ValueError(
            f"threshold must be an integer in 0..{UINT64_MAX} (got {text!r})"
        ) from None
    if isinstance(threshold, float) and threshold != value:
        raise ValueError(f"threshold must be an integer (got {text!r})")
    if not 0 <= value <= UINT64_MAX:
        raise ValueError(f"threshold must be in 0..{UINT64_MAX} (got {text!r})")
    return value
