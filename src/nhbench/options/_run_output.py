"""What a run writes and where: the percentiles reported, the output format, the output file
or directory, the HdrHistogram log and labels (`Output`).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import RunPart, lower
from ._values import as_tuple

__all__ = ["DEFAULT_PERCENTILES", "Output"]


DEFAULT_PERCENTILES: tuple[float, ...] = (50.0, 75.0, 90.0, 99.0, 99.9, 99.99)
#: The most percentiles one run reports (docs/reliability.md).
MAX_PERCENTILES = 1000


def _percent_from_text(item: object) -> float:
    if isinstance(item, bool):
        raise ValueError
    number = float(item)  # type: ignore[arg-type]
    if not (0 < number <= 100) or math.isnan(number):
        raise ValueError
    return number


class Output(RunPart):
    """What the run writes: percentiles, the format, where it goes, labels."""

    percentiles: Annotated[tuple[float, ...], Flag(metavar="P,P,...")] = Field(
        default=DEFAULT_PERCENTILES,
        description="Percentiles to report, in percent (50,90,99.9). Reported exactly at "
        "these points, plus min and max. At most 1000.",
    )
    # The names of nhbench.outputs.OUTPUT_FORMATS, in its order, and the description lists
    # them too: written out because the option layer sits below the outputs (and a Literal
    # built at run time would be opaque to mypy); tests/test_transform.py keeps them equal.
    output_format: Annotated[
        Literal["human", "json", "yaml", "dotted", "csv", "fortio",
                "experimental_fortio_pedantic", "prometheus", "nighthawk_human"],
        Flag(metavar="FORMAT"),
    ] = Field(
        default="human",
        description="Output format: human (nhbench's report), or one of Nighthawk's: json, "
        "yaml, dotted, csv, fortio, experimental_fortio_pedantic, prometheus, "
        "nighthawk_human (its text report, byte for byte) (docs/outputs.md).",
    )
    output: Annotated[str | None, Flag(metavar="FILE")] = Field(
        default=None, description="Write the output to this file instead of stdout: a regular "
        "file is replaced atomically (its permissions kept); -, a FIFO or a device such as "
        "/dev/null is streamed into; a symbolic link is followed (docs/reliability.md)."
    )
    output_dir: Annotated[str | None, Flag(metavar="DIR", default="")] = Field(
        default=None, description="Write the output into this directory (created if missing) "
        "under a new name, <UTC YYYY-MM-DD-HHMMSS>_<labels>.<ext>, as Fortio's -a does; an "
        "existing file is never overwritten. Prints the path written. Not with output."
    )
    hdr_log: Annotated[str | None, Flag(metavar="FILE", default="")] = Field(
        default=None, description="Also write the latency histograms as an HdrHistogram log "
        "(HistogramLogWriter's format, values in ns): one histogram per interval with "
        "stats_interval on, else one per statistic for the whole run (docs/outputs.md)."
    )
    label: Annotated[
        tuple[str, ...], Flag(metavar="TEXT", append=True, aliases=("-labels",))
    ] = Field(
        default=(), description="Labels kept in the output; repeatable."
    )

    @field_validator("label", mode="before")
    @classmethod
    def _labels(cls, value: object) -> object:
        return as_tuple(value)

    @field_validator("percentiles", mode="before")
    @classmethod
    def _parse_percentiles(cls, value: object) -> object:
        items: Any = value.split(",") if isinstance(value, str) else value
        if isinstance(items, (int, float)):
            items = [items]
        try:
            items = list(items)
        except TypeError:
            raise ValueError(
                f"must be percentages in (0, 100], e.g. 50,90,99.9 (got {value!r})"
            ) from None
        if len(items) > MAX_PERCENTILES:
            # Each one is a row of every report and a lookup in every histogram: 99,999 of
            # them took 17.7 s and 676 MB to report a 0.5 s run.
            raise ValueError(f"at most {MAX_PERCENTILES} percentiles (got {len(items)})")
        try:
            numbers = [_percent_from_text(item) for item in items]
        except (TypeError, ValueError):
            raise ValueError(
                f"must be percentages in (0, 100], e.g. 50,90,99.9 (got {value!r})"
            ) from None
        if not numbers:
            raise ValueError("must name at least one percentile, e.g. 50,90,99.9")
        return tuple(sorted(set(numbers)))

    @field_validator("output", "hdr_log")
    @classmethod
    def _check_output(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("must be a file path (got an empty string)")
        return value

    @field_validator("output_dir")
    @classmethod
    def _check_output_dir(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        if not value.strip():
            raise ValueError("must be a directory path (got an empty string)")
        if "\0" in value:
            raise ValueError(f"must not contain a NUL character (got {value!r})")
        if info.data.get("output") is not None:
            # Both name where the one output goes; which one wins would be a guess.
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "output_dir", "b": "output"},
            )
        return value

    @field_validator("output_format", mode="before")
    @classmethod
    def _lower_output_format(cls, value: object) -> object:
        return lower(value)
