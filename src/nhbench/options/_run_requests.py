"""What a request is: its method, headers and body size (`RequestLine`), its body from a
payload, a file or random bytes, its content type, templating and HTTP/1.0 (`RequestBody`),
and the requests of a Nighthawk request source or a replayed recording (`RequestSources`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from .._input import InputError, check_input
from .._request import MAX_TEMPLATED_REQUEST, METHODS, template_problem
from ._flags import Flag
from ._run_model import Data, RunPart, lower
from ._values import as_tuple, echo_scheme, parse_header

if TYPE_CHECKING:
    from ._run import Options

__all__ = [
    "MAX_REQUEST_BODY_SIZE",
    "RequestBody",
    "RequestLine",
    "RequestSources",
    "check_request_source",
    "payload_means_post",
    "replay_offsets_first",
]


# The request (head and body) is rendered once and kept in memory by every worker; 64 MiB is
# far beyond any sensible load-test body while keeping a typo from allocating gigabytes.
MAX_REQUEST_BODY_SIZE = 64 * 1024 * 1024

Method = Literal["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "CONNECT"]
assert set(METHODS) == set(Method.__args__)  # type: ignore[attr-defined]


class RequestLine(RunPart):
    """The request line and head: method, extra headers, a body of 'a' bytes."""

    request_method: Annotated[
        Method, Flag(metavar="METHOD", aliases=("-X",))
    ] = Field(
        default="GET", description="Request method."
    )
    request_header: Annotated[
        tuple[str, ...], Flag(metavar="'NAME: VALUE'", append=True, aliases=("-H",))
    ] = Field(
        default=(),
        description="Extra request headers as 'name: value'; repeatable. A Host or "
        "User-Agent header replaces nhbench's own.",
    )
    request_body_size: Annotated[int, Flag(metavar="BYTES")] = Field(
        default=0, ge=0, le=MAX_REQUEST_BODY_SIZE,
        description="Request body size in bytes; the body is that many 'a' characters.",
    )

    @field_validator("request_method", mode="before")
    @classmethod
    def _upper_method(cls, value: object) -> object:
        return value.strip().upper() if isinstance(value, str) else value

    @field_validator("request_header", mode="before")
    @classmethod
    def _check_headers(cls, value: object) -> object:
        value = as_tuple(value)
        if isinstance(value, (list, tuple)):
            normalized = []
            for item in value:
                name, header_value = parse_header(item)
                normalized.append(f"{name}: {header_value}")
            return tuple(normalized)
        return value


class RequestBody(RunPart):
    """The request's body (one of payload, payload_file, payload_size), its content type,
    templating and HTTP/1.0."""

    payload: Annotated[str | None, Flag(metavar="TEXT", aliases=("-payload",))] = Field(
        default=None,
        description="Request body: this text (UTF-8). A payload switches the method to POST "
        "unless --request-method is given, and sets Content-Type: application/octet-stream "
        "unless one is given (as Fortio does).",
    )
    payload_file: Annotated[str | None, Flag(metavar="FILE", aliases=("-payload-file",))] = Field(
        default=None,
        description="Request body: the bytes of this file (at most 64 MiB), read once before "
        "the run. Switches to POST like --payload.",
    )
    payload_size: Annotated[int | None, Flag(metavar="BYTES", aliases=("-payload-size",))] = Field(
        default=None, ge=0, le=MAX_REQUEST_BODY_SIZE,
        description="Request body: this many random bytes, drawn once per run and sent with "
        "every request (Fortio's -payload-size; --request-body-size sends 'a' bytes). "
        "Switches to POST like --payload when above 0. tcp:// and udp:// echo: the payload "
        "(24 random bytes without a payload option).",
    )
    content_type: Annotated[str | None, Flag(metavar="TYPE", aliases=("-content-type",))] = Field(
        default=None,
        description="Content-Type request header; switches the method to POST unless "
        "--request-method is given (as Fortio's -content-type does).",
    )
    template: Annotated[bool, Flag()] = Field(
        default=False,
        description="Expand {seq}, {uuid}, {rand:N} and {worker} in the path, header values "
        "and body of every request (docs/engine.md). Off: braces are sent as they are.",
    )
    http1_0: Annotated[bool, Flag(name="--http1.0", aliases=("-http1.0",))] = Field(
        default=False,
        description="Send HTTP/1.0 requests as Fortio's -http1.0 does: no Host header unless "
        "one is given, no keep-alive (a new connection for every request).",
    )

    @field_validator("payload", "payload_file", "payload_size")
    @classmethod
    def _one_payload(cls, value: object, info: ValidationInfo) -> object:
        if value is None or (info.field_name == "payload_size" and value == 0):
            return value
        # One body: which of two would win is a guess (Fortio silently prefers the file).
        for other in ("payload", "payload_file", "payload_size"):
            if other == info.field_name:
                break
            if info.data.get(other) not in (None, 0):
                raise PydanticCustomError(
                    "options_conflict", "{a}: mutually exclusive with {b}",
                    {"a": info.field_name or "", "b": other},
                )
        if info.data.get("request_body_size"):
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": info.field_name or "", "b": "request_body_size"},
            )
        return value

    @field_validator("payload_file")
    @classmethod
    def _check_payload_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        path = os.path.expanduser(value)
        # The file belongs to the machine of the run (see cacert).
        if (info.context or {}).get("echo"):
            return path
        try:
            return check_input(path, "payload")
        except InputError as exc:
            raise ValueError(f"{exc.reason} (got {value!r})") from None

    @field_validator("content_type")
    @classmethod
    def _check_content_type(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        name, checked = parse_header(f"Content-Type: {value}")
        if not checked:
            raise ValueError("must not be empty")
        headers = info.data.get("request_header") or ()
        if any(str(item).split(":", 1)[0].strip().lower() == "content-type" for item in headers):
            raise ValueError("a Content-Type request header is given too; give one of them")
        return checked

    @field_validator("template")
    @classmethod
    def _check_template(cls, value: bool, info: ValidationInfo) -> bool:
        if not value:
            return value
        # Every placeholder-looking word is checked before the run: a typo such as {sequence}
        # would otherwise be sent as it is, and nobody would notice.
        places: list[tuple[str, str]] = [("the URI", str(info.data.get("uri") or ""))]
        places += [("a request header", str(h)) for h in info.data.get("request_header") or ()]
        if info.data.get("payload") is not None:
            places.append(("the payload", str(info.data["payload"])))
        body_size = int(info.data.get("payload_size") or info.data.get("request_body_size") or 0)
        file = info.data.get("payload_file")
        if file is not None and not (info.context or {}).get("echo"):
            with open(file, "rb") as handle:
                data = handle.read(MAX_TEMPLATED_REQUEST + 1)
            places.append(("the payload file", data.decode("latin-1")))
            body_size = len(data)
        for where, text in places:
            problem = template_problem(text)
            if problem is not None:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}",
                    {"a": "template", "msg": problem.replace(" (known", f" in {where} (known")
                     if " (known" in problem else f"{problem} (in {where})"},
                )
        body_size = max(body_size, len(str(info.data.get("payload") or "").encode()))
        if body_size > MAX_TEMPLATED_REQUEST // 2:
            # Each connection (HTTP/1) or in-flight request (HTTP/2) gets a buffer for the
            # longest expansion; half of the core's bound leaves the head room to grow.
            raise PydanticCustomError(
                "options_file", "{a}: {msg}",
                {"a": "template", "msg": f"a templated body may be at most "
                 f"{MAX_TEMPLATED_REQUEST // 2} bytes (got {body_size})"},
            )
        return value

    @field_validator("http1_0")
    @classmethod
    def _check_http1_0(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("protocol") == "http2":
            raise PydanticCustomError(
                "options_conflict", "{a}: mutually exclusive with {b}",
                {"a": "http1_0", "b": "protocol"},
            )
        return value


class RequestSources(RunPart):
    """The requests of a Nighthawk request source plugin or of a replayed recording."""

    request_source_plugin_config: Annotated[
        str | None, Flag(metavar="JSON|YAML", group="Request sources and replay")
    ] = Field(
        default=None,
        description="Nighthawk's request source plugin config (JSON, its relaxed JSON or "
        "YAML): nighthawk.in-line-options-list-request-source-plugin with an options_list, "
        "or nighthawk.file-based-request-source-plugin with a file_path; each worker cycles "
        "through the list; num_requests ends the run after that many requests per worker "
        "(docs/engine.md).",
    )
    replay: Annotated[
        str | None, Flag(metavar="FILE", group="Request sources and replay")
    ] = Field(
        default=None,
        description="Replay the requests of a HAR file or an nginx (combined/common) or "
        "Envoy (default format) access log: method, path, headers and body as each format "
        "records them; the run's URI stays the target. Each worker cycles through them in "
        "order.",
    )
    replay_format: Annotated[
        Literal["auto", "har", "nginx", "envoy"],
        Flag(metavar="auto|har|nginx|envoy", group="Request sources and replay"),
    ] = Field(
        default="auto",
        description="The format of the replay file: auto (a .har name or JSON is HAR; a "
        "line starting with '[' is Envoy's, others nginx's).",
    )
    replay_timing: Annotated[
        Literal["rate", "original"],
        Flag(metavar="rate|original", group="Request sources and replay"),
    ] = Field(
        default="rate",
        description="rate: the replayed requests go at --rps; original: at their recorded "
        "times (from the first), each worker once through the file, then the run ends.",
    )

    @field_validator("request_source_plugin_config", mode="before")
    @classmethod
    def _plugin_config_text(cls, value: object) -> object:
        # From Python the config may be given as the mapping itself; it is kept as JSON text,
        # the form the CLI takes, so that the echo of the options is the same either way.
        if isinstance(value, Mapping):
            import json

            return json.dumps(value)
        return value

    @field_validator("replay_format", "replay_timing", mode="before")
    @classmethod
    def _lower_source_choice(cls, value: object) -> object:
        return lower(value)


# ---- the normalisation steps and the checks (their order: _run_checks) ---------------------


def payload_means_post(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # Fortio's rule: a payload or a content type makes the request a POST unless a method
    # is given. Writing POST down here keeps the echo of the options saying what was sent.
    if data.get("request_method") is not None:
        return data
    if echo_scheme(data.get("uri")) is not None:
        return data  # an echo request has no method
    size = data.get("payload_size")
    try:
        sized = size is not None and int(size) > 0
    except (TypeError, ValueError):
        sized = False  # the field's own validator says what is wrong with it
    if data.get("payload") or data.get("payload_file") is not None or sized \
            or data.get("content_type"):
        return {**data, "request_method": "POST"}
    return data


def replay_offsets_first(data: Data, info: ValidationInfo, model: type[BaseModel]) -> Data:
    # A replay at the original pace is an explicit schedule: its offsets go in as if
    # given, and without a duration the run has no time limit, so that a replay is not
    # cut at the default 5 s but ends after its last request (said here rather than left
    # to the schedule's step, which comes after this one, before duration_default:
    # _run_checks.NORMALISE). A value the user gave as well is compared after validation.
    if ((info.context or {}).get("echo")
            or "schedule_offsets" not in model.model_fields
            or data.get("schedule_offsets") is not None
            or not isinstance(data.get("replay"), str)
            or lower(data.get("replay_timing")) != "original"
            or data.get("request_source_plugin_config") is not None):
        return data
    from ._request_set import request_source_offsets

    try:
        offsets = request_source_offsets(str(data["replay"]),
                                         str(lower(data.get("replay_format", "auto"))))
    except ValueError as exc:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}", {"a": "replay", "msg": str(exc)}) from None
    data = {**data, "schedule_offsets": offsets}
    if data.get("duration") is None:
        data["no_duration"] = True
    return data


def check_request_source(options: Options, info: ValidationInfo) -> None:
    # The source is read here, before any load, so that a bad file is bad input (one
    # line naming the file, the entry and the problem; exit 2). The file belongs to the
    # machine of the run: the echo of options in a Result written elsewhere is only
    # checked for its shape.
    if options.replay is None:
        for name, default in (("replay_format", "auto"), ("replay_timing", "rate")):
            if getattr(options, name) != default:
                raise PydanticCustomError(
                    "options_needs", "{a}: needs {b}", {"a": name, "b": "replay"})
    elif options.request_source_plugin_config is not None:
        raise PydanticCustomError(
            "options_conflict", "{a}: mutually exclusive with {b}",
            {"a": "replay", "b": "request_source_plugin_config"})
    if (info.context or {}).get("echo"):
        return
    from ._request_set import apply_source_schedule, request_source

    option = "replay" if options.replay is not None else "request_source_plugin_config"
    try:
        source = request_source(options)
    except ValueError as exc:
        raise PydanticCustomError(
            "options_file", "{a}: {msg}", {"a": option, "msg": str(exc)}) from None
    if source is not None:
        try:
            apply_source_schedule(options, source)
        except ValueError as exc:
            raise PydanticCustomError(
                "options_file", "{a}: {msg}", {"a": option, "msg": str(exc)}) from None
        if any(spec.checks for spec in source.specs):
            # The entries' own response checks (docs/checks.md): their grammar, their names
            # against --check's and each other's, the run's total, and a protocol that
            # judges responses.
            from ._response_checks import refuse_check_protocol, run_checks

            try:
                run_checks(options.check, source.specs)
            except ValueError as exc:
                raise PydanticCustomError(
                    "options_file", "{a}: {msg}", {"a": option, "msg": str(exc)}) from None
            refuse_check_protocol(options, option)
