"""Statistics per group (``--group-by``, docs/engine.md "Groups"): by request kind, by
target, or by the value of a response header. Planned by `nhbench._groups`."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

from pydantic import Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._run_model import RunPart

if TYPE_CHECKING:
    from ._run import Options

__all__ = ["Grouping", "check_groups"]

_HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")


class Grouping(RunPart):
    """``--group-by``: statistics per request kind, target or response-header value."""

    group_by: Annotated[str | None, Flag(metavar="none|request|target|header:NAME")] = Field(
        default=None,
        description="Count requests and their latency per group (docs/engine.md \"Groups\"): "
        "request (a request source's entry names, else method and route template), target "
        "(--multi-target-endpoint) or header:NAME (each value of the response header NAME, "
        "with the spread max/min share; for load balancers and canaries). At most 64 groups, "
        "then (other). Default: request when the request source names its entries, else none.",
    )

    @field_validator("group_by", mode="before")
    @classmethod
    def _parse_group_by(cls, value: object) -> object:
        if value is None or not isinstance(value, str):
            return value
        text = value.strip()
        if text in ("none", "request", "target"):
            return text
        if text.startswith("header:") and _HEADER_NAME.fullmatch(text[len("header:"):]):
            return "header:" + text[len("header:"):].lower()
        if text.startswith("header:"):
            raise ValueError(f"{value!r}: {text[len('header:'):]!r} is not a header name "
                             "(an HTTP token of 1 to 256 characters)")
        raise ValueError(f"{value!r}: expected none, request, target or header:NAME")


def check_groups(options: Options, info: ValidationInfo) -> None:
    """Grouping by target needs several targets; by a header, a protocol with headers."""
    del info
    by = options.group_by
    if by == "target" and not options.multi_target_endpoint:
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": "group_by", "msg": "target needs several targets (--multi-target-endpoint)"})
    scheme = options.target.scheme if options.uri else "http"
    if by is not None and by.startswith("header:") and scheme in ("tcp", "udp"):
        raise PydanticCustomError("options_file", "{a}: {msg}", {
            "a": "group_by", "msg": f"{by}: {scheme}:// responses have no headers"})
