"""Nighthawk's ``ResponseOptions`` (its JSON names): the response body size, extra headers,
echoed request headers and delays, static or per request (``x-nighthawk-test-server-config``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from ._flags import Flag
from ._values import (
    check_header_name,
    check_header_value,
    parse_server_duration,
    split_header,
)

__all__ = ["MAX_RESPONSE_BODY_SIZE", "RESPONSE_FIELDS", "HeaderKeyValue", "LinearDelay",
           "ResponseHeader", "ResponseOptions", "StrictModel"]

# The section of ``nhbench server --help`` these options are listed in.
_GROUP = "Nighthawk response options (static)"
# Nighthawk's test server caps the response body at 4 MiB; so does this one.
MAX_RESPONSE_BODY_SIZE = 4 * 1024 * 1024


def _header_from_text(text: str) -> dict[str, Any]:
    name, value = split_header(text)
    return {"header": {"key": name, "value": value}, "append": False}


class StrictModel(BaseModel):
    """A frozen model that refuses unknown keys: the base of every server options model."""

    # defer_build: a model's validator is built on its first use, not when the class is
    # defined, so that importing the options package costs little (docs/benchmarks.md,
    # "Start-up"); validation and its messages are the same either way.
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class HeaderKeyValue(StrictModel):
    key: str
    value: str = ""

    @model_validator(mode="after")
    def _check(self) -> HeaderKeyValue:
        check_header_name(self.key, f"{self.key}: {self.value}")
        check_header_value(self.value, f"{self.key}: {self.value}")
        return self


class ResponseHeader(StrictModel):
    """Envoy's ``HeaderValueOption``: ``{"header": {"key": k, "value": v}, "append": b}``.

    ``append`` false (Nighthawk's default) replaces any header of that name the response
    already has (the server's own ``content-type``, or one set earlier); true adds another.
    """

    header: HeaderKeyValue
    append: bool = False

    @model_validator(mode="before")
    @classmethod
    def _from_shortcuts(cls, data: Any) -> Any:
        if isinstance(data, str) and data.lstrip().startswith("{"):
            # the JSON shape given as text (a --response-header flag)
            try:
                data = json.loads(data)
            except ValueError:
                raise ValueError(
                    f"must be 'name: value' or Nighthawk's JSON "
                    f"{{\"header\": {{\"key\": ..., \"value\": ...}}, \"append\": ...}} "
                    f"(got {data!r})"
                ) from None
        if isinstance(data, str):
            return _header_from_text(data)
        if isinstance(data, (tuple, list)) and len(data) == 2:
            name, value = data
            return {"header": {"key": str(name).strip(), "value": str(value).strip()},
                    "append": False}
        if isinstance(data, Mapping) and isinstance(data.get("append"), Mapping):
            # protobuf's BoolValue wrapper written out: {"value": true}
            data = {**data, "append": data["append"].get("value", False)}
        return data

    def text(self) -> str:
        return f"{self.header.key}: {self.header.value}"




class LinearDelay(StrictModel):
    """Nighthawk's ``ConcurrencyBasedLinearDelay``: delay = minimal + factor × active requests."""

    minimal_delay: float = Field(default=0.0, ge=0, le=3600)
    concurrency_delay_factor: float = Field(default=0.0, ge=0, le=3600)

    @field_validator("minimal_delay", "concurrency_delay_factor", mode="before")
    @classmethod
    def _durations(cls, value: object) -> object:
        return parse_server_duration(value)


def _parse_linear_delay(value: object) -> object:
    """``"1ms,100us"`` (minimal, factor) on the command line; a mapping in files."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if len(parts) != 2:
            raise ValueError(
                f"must be MINIMAL,FACTOR such as 1ms,100us (got {value!r})"
            )
        return {"minimal_delay": parts[0], "concurrency_delay_factor": parts[1]}
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return {"minimal_delay": value[0], "concurrency_delay_factor": value[1]}
    return value


class ResponseOptions(StrictModel):
    """Nighthawk's ``ResponseOptions`` (its JSON names), static or per request.

    Per request, the same JSON goes in the ``x-nighthawk-test-server-config`` request header
    and is merged over these (scalars replace, ``response_headers`` append).
    """

    response_body_size: Annotated[int | None, Flag(metavar="BYTES", group=_GROUP)] = Field(
        default=None, ge=0, le=MAX_RESPONSE_BODY_SIZE,
        description="Response body size in bytes (at most 4 MiB). Unset: Fortio's rules "
        "(the request body is echoed unless size= asks otherwise).",
    )
    response_headers: Annotated[
        tuple[ResponseHeader, ...],
        Flag(name="--response-header", metavar="'NAME: VALUE'|JSON", append=True, group=_GROUP),
    ] = Field(
        default=(),
        description="Extra response headers, 'name: value' or Nighthawk's "
        "{\"header\": {\"key\": ..., \"value\": ...}, \"append\": bool}; repeatable.",
    )
    echo_request_headers: Annotated[bool, Flag(group=_GROUP)] = Field(
        default=False, description="Echo the request headers in the response body."
    )
    static_delay: Annotated[float | None, Flag(metavar="TIME", group=_GROUP)] = Field(
        default=None, ge=0, le=3600,
        description="Fixed delay before each response (5ms, 0.1s); a timer, not a sleep.",
    )
    concurrency_based_linear_delay: Annotated[
        LinearDelay | None, Flag(metavar="MINIMAL,FACTOR", group=_GROUP)
    ] = Field(
        default=None,
        description="Delay of minimal_delay + concurrency_delay_factor x requests active on "
        "the worker, given as MINIMAL,FACTOR (1ms,100us).",
    )
    emit_previous_request_delta_in_response_header: Annotated[
        str | None, Flag(metavar="NAME", group=_GROUP)
    ] = Field(
        default=None,
        description="Response header that carries the nanoseconds since the previous "
        "request on that worker.",
    )

    @model_validator(mode="before")
    @classmethod
    def _nighthawk_names(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        data = dict(data)
        data.pop("@type", None)
        # Newer Nighthawk spells the list v3_response_headers; both mean the same here.
        if "v3_response_headers" in data:
            v3 = _as_header_list(data.pop("v3_response_headers"))
            data["response_headers"] = [*_as_header_list(data.get("response_headers")), *v3]
        return data

    @field_validator("response_headers", mode="before")
    @classmethod
    def _headers(cls, value: object) -> object:
        return _as_header_list(value)

    @field_validator("static_delay", mode="before")
    @classmethod
    def _delay(cls, value: object) -> object:
        return None if value is None else parse_server_duration(value)

    @field_validator("concurrency_based_linear_delay", mode="before")
    @classmethod
    def _linear(cls, value: object) -> object:
        return _parse_linear_delay(value)

    @field_validator("emit_previous_request_delta_in_response_header", mode="before")
    @classmethod
    def _delta_header(cls, value: object) -> object:
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"must be a header name (got {value!r})")
        name = value.strip()
        if not name:
            return None  # proto3's empty string: off
        return check_header_name(name, value)

    @model_validator(mode="after")
    def _one_delay(self) -> ResponseOptions:
        if self.static_delay is not None and self.concurrency_based_linear_delay is not None:
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "static_delay", "b": "concurrency_based_linear_delay"},
            )
        return self


def _as_header_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        if "header" in value:
            return [value]
        # {"X-A": "1", "X-B": "2"}: the dictionary shortcut
        return [{"header": {"key": str(k), "value": str(v)}, "append": False}
                for k, v in value.items()]
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(
        isinstance(x, str) for x in value
    ) and ":" not in value[0]:
        # ("X-A", "1") given where a list is expected is one header
        return [value]
    try:
        return list(value)
    except TypeError:
        return [value]


RESPONSE_FIELDS: tuple[str, ...] = tuple(ResponseOptions.model_fields)
