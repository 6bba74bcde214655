"""The ``json`` output format: Nighthawk's JSON, the proto3 JSON mapping of its ``Output``
(see `nhbench.outputs._nighthawk` for the mapping and for where nhbench's own data goes)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._nighthawk import dumps, nighthawk_output

if TYPE_CHECKING:
    from .._result import Result

__all__ = ["format_json", "render_json"]


def format_json(document: Mapping[str, Any]) -> str:
    """A Nighthawk Output document as Nighthawk writes it (one-space indentation, 64-bit
    integers as strings), with a trailing newline."""
    return dumps(document)


def render_json(result: Result) -> str:
    """Nighthawk's JSON of `result`, lossless (``Result.model_validate_json`` and
    `nhbench.load_result` give the result back)."""
    return format_json(nighthawk_output(result))
