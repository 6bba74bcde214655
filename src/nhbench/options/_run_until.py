"""``--until STAT:±X%`` and ``--max-duration``: run until the confidence interval of the
named statistics is that tight, bounded by a maximum duration (`Until`; docs/trust.md,
"Running until the numbers are tight").

The grammar and the refusals live here, so that a bad ``--until`` is refused before any
load is sent; the estimate itself is ``nhbench._until``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import Data, RunPart
from ._run_observe import MIN_STATS_INTERVAL
from ._values import MAX_DURATION, as_tuple, parse_duration

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["UNTIL_MIN_INTERVALS", "UNTIL_STATISTICS", "Until", "check_until",
           "parse_until", "until_first", "until_targets"]

#: The statistics --until can wait for, as `nhbench compare` names them.
UNTIL_STATISTICS = ("p50", "p90", "p99", "p99.9", "mean", "rate")
#: Intervals before the first estimate, and so the fewest a --max-duration must hold:
#: Politis & White's block length reads the autocorrelations up to sqrt(n) + 5 lags (half
#: the series at 20), the block length is kept to a third of the intervals (three blocks or
#: more to draw from), and a stopping rule that looks at an interval of very few blocks
#: stops on one that is narrow by chance (docs/trust.md gives the reasoning in full).
UNTIL_MIN_INTERVALS = 20

_UNTIL = re.compile(r"^\s*([A-Za-z0-9.]+)\s*:\s*(?:±|\+-|\+/-)?\s*([0-9]*\.?[0-9]+)\s*%\s*$")


def parse_until(value: object) -> str:
    """One ``STAT:±X%`` (also ``+-X%`` and ``X%``) as its canonical ``STAT:X%``; a
    ValueError naming what is wrong otherwise."""
    if not isinstance(value, str):
        raise ValueError(f"expected STAT:±X% such as p99:±2% (got {value!r})")
    match = _UNTIL.match(value)
    if match is None:
        raise ValueError(f"expected STAT:±X% such as p99:±2%, a percentage with its % sign "
                         f"(got {value!r})")
    statistic, width = match.group(1).lower(), float(match.group(2))
    if statistic not in UNTIL_STATISTICS:
        raise ValueError(f"unknown statistic {match.group(1)!r} (known: "
                         f"{', '.join(UNTIL_STATISTICS)})")
    if not 0 < width < 100:
        raise ValueError(f"the width must be above 0% and below 100% (got {value!r})")
    return f"{statistic}:{width:g}%"


def until_targets(until: tuple[str, ...]) -> list[tuple[str, float]]:
    """The canonical ``STAT:X%`` entries as (statistic, relative half-width)."""
    out = []
    for entry in until:
        statistic, _, width = entry.rpartition(":")
        out.append((statistic, float(width.rstrip("%")) / 100))
    return out


class Until(RunPart):
    """Run until the named statistics' confidence intervals are tight enough."""

    until: Annotated[tuple[str, ...], Flag(metavar="STAT:±X%", append=True)] = Field(
        default=(),
        description="Run until the 95% confidence interval of STAT (" + ", ".join(
            UNTIL_STATISTICS) + ") has a half-width of at most X% of its estimate (block "
        "bootstrap over the live-statistics intervals; docs/trust.md \"Running until the "
        "numbers are tight\"); repeatable: all must hold. Also STAT:+-X% and STAT:X%. "
        "Needs max_duration; turns live statistics on when stats_interval is not given.",
    )
    max_duration: Annotated[float | None, Flag(metavar="TIME", default="")] = Field(
        default=None, gt=0, le=MAX_DURATION,
        description="With until: the longest the run may last; it ends there, saying the "
        "target was not reached. Not with duration (which until sets to this).",
    )

    @field_validator("until", mode="before")
    @classmethod
    def _parse_until(cls, value: object) -> object:
        entries = as_tuple(value)
        if not isinstance(entries, (list, tuple)):
            return entries
        parsed = tuple(parse_until(entry) for entry in entries)
        seen: set[str] = set()
        for entry in parsed:
            statistic = entry.rpartition(":")[0]
            if statistic in seen:
                raise ValueError(f"{statistic} given twice")
            seen.add(statistic)
        return parsed

    @field_validator("max_duration", mode="before")
    @classmethod
    def _parse_max_duration(cls, value: object) -> object:
        return None if value is None else parse_duration(value)


# ---- the normalisation step and the check (their order: _run_checks) ----------------------


def _seconds(value: object) -> float | None:
    try:
        return None if value is None else parse_duration(value)
    except ValueError:
        return None  # the field's own validator says what is wrong with it


def until_first(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # --until ends the run itself; --max-duration is its bound and becomes the core's
    # duration. Decided before duration_default would fill in 5 s and before the schedule
    # shapes, whose own conflicts with duration would name an option the user never gave.
    until = data.get("until")
    if not until:
        if data.get("max_duration") is not None:
            raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                      {"a": "max_duration", "b": "until"})
        return data
    for other in ("stage", "requests", "schedule_offsets", "no_duration", "ray", "loadgen"):
        if data.get(other):
            raise PydanticCustomError("options_conflict", "{a}: mutually exclusive with {b}",
                                      {"a": "until", "b": other})
    if data.get("max_duration") is None:
        raise PydanticCustomError("options_needs", "{a}: needs {b}",
                                  {"a": "until", "b": "max_duration"})
    bound = _seconds(data["max_duration"])
    duration = data.get("duration")
    if duration is not None and _seconds(duration) != bound:
        # The duration a run without --until has is the bound here: one of them, not two
        # that could disagree. (The same value passes: the echo of an --until run, and a
        # copy of its options with one field changed, carry both.)
        raise PydanticCustomError("options_conflict", "{a}: mutually exclusive with {b}",
                                  {"a": "until", "b": "duration"})
    return {**data, "duration": data["max_duration"]}


def check_until(options: Options, info: ValidationInfo) -> None:
    if not options.until:
        return
    interval = options.stats_interval
    if interval == 0:
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": "until", "msg": "needs live statistics (stats_interval is off)"})
    bound = options.max_duration or 0.0
    smallest = interval if interval is not None else MIN_STATS_INTERVAL
    if bound < UNTIL_MIN_INTERVALS * smallest - 1e-9:
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": "until", "msg": f"max_duration {bound:g}s holds fewer than the "
            f"{UNTIL_MIN_INTERVALS} intervals of {smallest:g}s the first estimate needs"})
    if options.rps > 0 and any(t.startswith("rate:") for t in options.until):
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": "until", "msg": "rate is set by rps in an open loop (the schedule keeps it, "
            "its interval is the schedule's, not the server's); rate is for a closed loop, rps 0"})
