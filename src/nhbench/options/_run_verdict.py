"""When a run fails or stops: failure and termination predicates, Fortio's -abort-on, the
no-success rule, service-level objectives and the validity verdict's strictness (`Verdict`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from .._predicates import DEFAULT_FAILURE_PREDICATES, parse_predicates
from ._flags import Flag
from ._rules import StopRule
from ._run_model import RunPart
from ._values import as_tuple

__all__ = ["Verdict"]


class Verdict(RunPart):
    """What fails or ends the run: predicates, abort-on, SLOs."""

    failure_predicate: Annotated[dict[str, int], Flag(metavar="COUNTER:N", append=True)] = Field(
        default_factory=dict,
        description="'counter:threshold'; repeatable. The run stops and fails when the "
        "counter exceeds the threshold. Added to (and overriding) the defaults "
        + ", ".join(f"{k}:{v}" for k, v in DEFAULT_FAILURE_PREDICATES.items()) + ".",
    )
    termination_predicate: Annotated[
        dict[str, int], Flag(metavar="COUNTER:N", append=True)
    ] = Field(
        default_factory=dict,
        description="'counter:threshold'; repeatable. The run stops (successfully) when the "
        "counter exceeds the threshold.",
    )
    abort_on: Annotated[int | None, Flag(metavar="CODE", aliases=("-abort-on",))] = Field(
        default=None, ge=100, le=599,
        description="Stop and fail the run on the first response with this status code, as "
        "Fortio's -abort-on: the failure predicate benchmark.http_CODE:0.",
    )
    no_default_failure_predicates: Annotated[bool, Flag()] = Field(
        default=False, description="Do not add the default failure predicates."
    )
    allow_no_success: Annotated[bool, Flag()] = Field(
        default=False,
        description="Accept a run (or sweep step) in which no request succeeded, i.e. got a "
        "2xx response. Without it such a run fails: exit status 1 and one line saying why.",
    )
    slo: Annotated[tuple[str, ...], Flag(metavar="RULE", append=True)] = Field(
        default=(),
        description="A service-level objective checked on the result, such as 'p99<5ms', "
        "'error_rate<0.1%', 'rps>=1990' or 'benchmark.http_5xx==0' (docs/pytest.md); "
        "repeatable. The verdict table goes to stderr; a breach exits 99.",
    )

    validity: Annotated[Literal["report", "strict"], Flag(metavar="report|strict")] = Field(
        default="report",
        description="What the validity verdict (docs/trust.md \"Validity\": load generator, "
        "schedule, stationarity) does: 'report' (default) prints it and keeps it in the "
        "result; 'strict' also makes an invalid run exit 98 (a sweep: when any step was invalid, "
        "after its plan; adapt: an invalid step is measured again, and invalid twice stops "
        "the search).",
    )

    @field_validator("slo", mode="before")
    @classmethod
    def _parse_slo(cls, value: object) -> object:
        # Parsed here so that a malformed rule is refused before any load is sent; kept as
        # the expressions written, which is what the result's echo and every message show.
        rules = as_tuple(value)
        if isinstance(rules, (list, tuple)):
            return tuple(str(StopRule.parse(rule)) for rule in rules)
        return rules

    @field_validator("failure_predicate", "termination_predicate", mode="before")
    @classmethod
    def _parse_predicates(cls, value: object) -> object:
        return parse_predicates(value)
