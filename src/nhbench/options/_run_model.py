"""What every part of `Options` shares: the model configuration and two small helpers.

`Options` (`_run`) is composed of one model per concern (`_run_load`, `_run_requests`,
`_run_targets`, ...); each part is a `RunPart`, so that the composed class has one
configuration whichever part a reader looks at first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, ValidationInfo

__all__ = ["Data", "RunPart", "json_text", "lower", "uri_scheme_of"]

#: The options as given, before validation: what the normalisation steps read and return.
Data = Mapping[str, Any]


class RunPart(BaseModel):
    """The base of every part of `Options`: unknown keys refused, instances immutable."""

    # defer_build: the validator is built on the first validation, not when the class is
    # defined, so that importing the options package costs little (docs/benchmarks.md,
    # "Start-up"); validation and its messages are the same either way. The parts are never
    # validated on their own, so theirs is never built.
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=False,
                              defer_build=True)


def lower(value: object) -> object:
    """A choice as typed (" HTTP2 ") in the spelling the model keeps ("http2")."""
    return value.strip().lower() if isinstance(value, str) else value


def uri_scheme_of(info: ValidationInfo) -> str | None:
    """The URI's scheme as a field validator sees it: the URI is the first field, so every
    other field's validator sees it (when it was valid)."""
    uri = info.data.get("uri")
    return urlsplit(uri).scheme.lower() if isinstance(uri, str) else None


def json_text(value: object) -> object:
    """A config given as the object itself (a config file, Python), kept as JSON text: the
    form the command line takes, so that the echo of the options is the same either way."""
    if isinstance(value, Mapping):
        import json

        return json.dumps(value)
    return value
