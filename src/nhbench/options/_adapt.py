"""`AdaptOptions`: the search settings of ``nhbench adapt`` (docs/adapt.md).

``nhbench adapt`` is a campaign like a sweep: its URL, --duration, --cooldown, --out,
--resume, --note, --label, the --ssh and capture options are `SweepOptions`' and mean the
same, and every run option applies to each step. What replaces the sweep's plan (--rps,
--max-rps, --step-rps, --steps, --extend..., --stop-on-slo, --stop-on-blocked) is here: the
SLO rules every step must meet and the search's bounds, growth, precision, step limit and
confirmation runs. Rates are per worker, as the sweep's (Nighthawk's unit).

`split_adapt` separates a settings mapping into these options and the sweep's and run
options; `nhbench.adapt` turns the latter into the campaign's `SweepConfig` with
`prepare_sweep`, so every shared option is validated exactly as ``nhbench sweep`` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from .._exceptions import OptionsError
from ._errors import format_validation_error
from ._flags import Flag
from ._rules import StopRule, parse_rules
from ._steps import parse_rate
from ._sweep import RUN_OPTION_KEYS, SweepOptions

__all__ = [
    "ADAPT_KEYS",
    "AdaptOptions",
    "DEFAULT_MAX_SEARCH_STEPS",
    "NOT_IN_AN_ADAPT",
    "parse_precision",
    "split_adapt",
]

_SEARCH = "search"

#: Search steps at most unless --max-steps says otherwise: from 1 rps to a million with
#: --growth 2 takes 20 steps, and a 2 % bracket about 6 more.
DEFAULT_MAX_SEARCH_STEPS = 40

#: The sweep's plan options, which the search replaces (the rules are --slo; a blocked step
#: always fails, since a rate the client could not offer says nothing about the server).
NOT_IN_AN_ADAPT = ("rps", "step_rps", "steps", "extend", "extend_limit", "stop_on_blocked",
                   "stop_on_slo", "scenario")


def parse_precision(value: object) -> tuple[float, bool]:
    """``"2%"`` -> (0.02, relative), ``"50"`` -> (50.0, absolute rps per worker).
    ValueError (a message that follows ``--precision: ``) otherwise."""
    text = str(value).strip()
    relative = text.endswith("%")
    number = text[:-1].strip() if relative else text
    try:
        amount = float(number)
    except ValueError:
        raise ValueError(f"expected a percentage such as 2% or a rate per worker such as 50 "
                         f"(got {value!r})") from None
    if not math.isfinite(amount) or amount <= 0:
        raise ValueError(f"must be > 0 (got {value!r})")
    if relative:
        if amount >= 100:
            raise ValueError(f"a percentage must be below 100% (got {value!r})")
        return amount / 100, True
    # Rates are rounded to 9 decimals (round_rate); a finer bracket could never close.
    if amount < 1e-6:
        raise ValueError(f"an absolute precision must be at least 0.000001 rps (got {value!r})")
    return amount, False


def _rate(value: object) -> object:
    return None if value is None else parse_rate(value)


def _rules(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(str(item) for item in value)
    return (str(value),)


def _precision(value: object) -> str:
    parse_precision(value)
    return str(value).strip()


def _integer(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"must be an integer (got {value!r})")
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"must be an integer (got {value!r})") from None
    if not number.is_integer():
        raise ValueError(f"must be an integer (got {value!r})")
    return int(number)


def _growth(value: object) -> object:
    try:
        growth = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ValueError(f"must be a number (got {value!r})") from None
    if not math.isfinite(growth) or growth <= 1 or growth > 100:
        raise ValueError(f"must be a number above 1 and at most 100 (got {value!r})")
    return growth


class AdaptOptions(BaseModel):
    """The search settings of ``nhbench adapt`` (see the module doc)."""

    # defer_build: the validator is built on the first validation, not when the class is
    # defined, so that importing the options package costs little (docs/benchmarks.md,
    # "Start-up"); validation and its messages are the same either way.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False,
                              defer_build=True)

    slo: Annotated[
        tuple[str, ...], BeforeValidator(_rules), Flag(metavar="RULE", append=True, group=_SEARCH)
    ] = Field(
        default=(),
        description="A rule every step must meet, e.g. 'p99<5ms', 'mean<2ms', "
        "'error_rate<0.1%', 'achieved/requested>0.95' (the grammar of nhbench run --slo). "
        "Repeatable; at least one.",
    )
    min_rps: Annotated[float, BeforeValidator(_rate), Flag(metavar="N", group=_SEARCH)] = Field(
        default=10.0, description="First step, requests per second per worker.")
    max_rps: Annotated[float, BeforeValidator(_rate), Flag(metavar="N", group=_SEARCH)] = Field(
        default=1_000_000.0, description="Never step above this rate per worker.")
    growth: Annotated[float, BeforeValidator(_growth), Flag(metavar="X", group=_SEARCH)] = Field(
        default=2.0, description="Exponential phase: each passing step's rate times X.")
    precision: Annotated[str, BeforeValidator(_precision), Flag(metavar="P", group=_SEARCH)] = (
        Field(default="2%", description="Stop when the lowest failing rate is within P of the "
              "highest passing one: a percentage of it (2%) or a rate per worker (50)."))
    max_steps: Annotated[int, BeforeValidator(_integer), Flag(metavar="N", group=_SEARCH)] = (
        Field(default=DEFAULT_MAX_SEARCH_STEPS, ge=1, le=10_000,
              description="Search steps at most (confirmation runs not counted)."))
    confirm: Annotated[int, BeforeValidator(_integer), Flag(metavar="N", group=_SEARCH)] = Field(
        default=0, ge=0, le=1000,
        description="Run N more steps at the answer and report how many passed and the "
        "spread of each rule's value.")

    @model_validator(mode="before")
    @classmethod
    def _parse_rules(cls, data: Any) -> Any:
        # Raised outside any field so that the message shows the rule next to the flag, as
        # written ("--slo 'p99<5': ...").
        if isinstance(data, dict) and "slo" in data:
            data = dict(data)
            data["slo"] = _rules(data["slo"])
            parse_rules(data["slo"], flag="--slo", option="slo")
        return data

    @model_validator(mode="after")
    def _check_together(self) -> AdaptOptions:
        if not self.slo:
            raise OptionsError("--slo: at least one rule is required, e.g. --slo 'p99<5ms' "
                               "(what the search must keep meeting)", "slo")
        if self.min_rps > self.max_rps:
            raise OptionsError(f"--min-rps {self.min_rps:g} is above --max-rps "
                               f"{self.max_rps:g}", "min_rps")
        return self

    @property
    def rules(self) -> list[StopRule]:
        return parse_rules(self.slo, flag="--slo", option="slo")

    @property
    def precision_value(self) -> tuple[float, bool]:
        """(amount, relative): a fraction of the passing rate, or a rate per worker."""
        return parse_precision(self.precision)


#: The search's own settings (Python spelling).
ADAPT_KEYS = tuple(AdaptOptions.model_fields)


def split_adapt(settings: Mapping[str, Any]) -> tuple[AdaptOptions, dict[str, Any]]:
    """Validate the search settings in `settings` and return them with the rest (the
    sweep's campaign, SSH and capture options and the run options, still to be validated
    by `prepare_sweep`). OptionsError (one line, naming the flag) for an unknown name, a
    sweep plan option, or an invalid search setting."""
    for key in settings:
        if key in NOT_IN_AN_ADAPT:
            flag = "--" + key.replace("_", "-")
            raise OptionsError(f"{flag}: not an adapt option (the search chooses the rates; "
                               f"see --min-rps, --max-rps and --slo)", key)
        if (key not in ADAPT_KEYS and key not in SweepOptions.model_fields
                and key not in RUN_OPTION_KEYS):
            raise OptionsError(f"{key}: not an adapt option", key)
    own = {key: value for key, value in settings.items() if key in ADAPT_KEYS}
    try:
        options = AdaptOptions.model_validate(own)
    except ValidationError as exc:
        raise OptionsError(format_validation_error(exc, cli=True, model=AdaptOptions)) from None
    rest = {key: value for key, value in settings.items() if key not in ADAPT_KEYS}
    return options, rest
